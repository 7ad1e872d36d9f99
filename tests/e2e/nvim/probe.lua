-- Run by tests/e2e/test_neovim.py as `nvim --headless -c "luafile probe.lua" FILE` with a
-- real user configuration (HOME/.config/nvim, installed as the README says): wait until a
-- client named "grounding" has attached to the buffer and initialized, write what it knows
-- to $GROUNDING_RESULT as JSON, stop the servers and quit. No sleeps: vim.wait on a condition.
local wait_ms = tonumber(vim.env.GROUNDING_WAIT_MS or '') or 20000
local bufnr = vim.api.nvim_get_current_buf()
local function client()
  local get = vim.lsp.get_clients or function(filter) return vim.lsp.buf_get_clients(filter.bufnr) end
  for _, c in pairs(get({ bufnr = bufnr })) do
    if c.name == 'grounding' and c.initialized then return c end
  end
end
local out = { attached = vim.wait(wait_ms, function() return client() ~= nil end, 20) }
local c = client()
if c then
  out.root_dir = c.config.root_dir
  out.cmd = c.config.cmd
  out.offset_encoding = c.offset_encoding
  out.commands = vim.tbl_keys(vim.api.nvim_buf_get_commands(bufnr, {}))
  out.omnifunc = vim.bo[bufnr].omnifunc
end
local file = assert(io.open(vim.env.GROUNDING_RESULT, 'w'))
file:write(vim.fn.json_encode(out))
file:close()
local all = vim.lsp.get_clients or vim.lsp.get_active_clients
for _, each in pairs(all()) do vim.lsp.stop_client(each.id) end
vim.wait(3000, function() return #all() == 0 end, 20)
vim.cmd('qall!')
