-- Headless Neovim driver for tests/e2e/test_neovim.py: the REAL editor's LSP client talks to
-- the Grounding server (SPEC §10). Works with Neovim 0.7 (Debian bookworm's package: no
-- vim.lsp.start, so vim.lsp.start_client + buf_attach_client) through 0.11 (vim.lsp.start).
--
-- Run:  nvim --headless --clean -u init.lua FILE
-- Environment (set by the test):
--   GROUNDING_PYTHON   the Python that runs `-m server`
--   GROUNDING_REPO     the checkout, put on PYTHONPATH for the server
--   GROUNDING_ROOT     the workspace root (holds grounding.toml)
--   GROUNDING_RESULT   where to write the JSON result
--   GROUNDING_HOVER    optional "LINE:CHARACTER" (0-based, ASCII prefix so any encoding)
--   GROUNDING_WAIT_MS  optional upper bound for each wait (default 20000)
--
-- After the file is loaded (VimEnter) it waits -- vim.wait on a condition, not a sleep --
-- until the server has published diagnostics for the buffer, asks for hover at
-- GROUNDING_HOVER when the server advertises hoverProvider, writes everything as JSON and
-- quits. Any Lua error is written to the result as "error" (the test then fails with it).

local env = vim.env
local wait_ms = tonumber(env.GROUNDING_WAIT_MS or '') or 20000
local published = {} -- uri -> number of publishDiagnostics received
local raw = {}       -- uri -> the diagnostics of the last publication, as sent

local default_publish = vim.lsp.handlers['textDocument/publishDiagnostics']
vim.lsp.handlers['textDocument/publishDiagnostics'] = function(err, result, ctx, config)
  default_publish(err, result, ctx, config)
  if result and result.uri then
    published[result.uri] = (published[result.uri] or 0) + 1
    raw[result.uri] = result.diagnostics
  end
end

local function start_grounding(bufnr)
  local config = {
    name = 'grounding',
    cmd = { env.GROUNDING_PYTHON, '-m', 'server' },
    root_dir = env.GROUNDING_ROOT,
    cmd_env = { PYTHONPATH = env.GROUNDING_REPO },
  }
  if vim.lsp.start then -- Neovim 0.8+
    return vim.lsp.start(config, { bufnr = bufnr })
  end
  local id = vim.lsp.start_client(config)
  vim.lsp.buf_attach_client(bufnr, id)
  return id
end

vim.api.nvim_create_autocmd('BufReadPost', {
  pattern = { '*.md', '*.answer.json' },
  callback = function(args) start_grounding(args.buf) end,
})

local function client_of(bufnr)
  local clients = vim.lsp.get_clients and vim.lsp.get_clients({ bufnr = bufnr })
    or vim.lsp.buf_get_clients(bufnr)
  for _, client in pairs(clients) do
    if client.name == 'grounding' then return client end
  end
end

local function has_hover(client)
  local caps = client.server_capabilities
  if caps ~= nil then return caps.hoverProvider ~= nil and caps.hoverProvider ~= false end
  return client.resolved_capabilities and client.resolved_capabilities.hover or false
end

local function run()
  local out = { nvim = tostring(vim.version().major) .. '.' .. tostring(vim.version().minor)
    .. '.' .. tostring(vim.version().patch) }
  local ok, err = pcall(function()
    local bufnr = vim.api.nvim_get_current_buf()
    local uri = vim.uri_from_bufnr(bufnr)
    out.uri = uri
    out.published = vim.wait(wait_ms, function() return (published[uri] or 0) > 0 end, 50)
    local client = client_of(bufnr)
    out.attached = client ~= nil
    if client then
      out.offset_encoding = client.offset_encoding
      out.hover_provider = has_hover(client)
    end
    out.diagnostics = {}
    for _, d in ipairs(vim.diagnostic.get(bufnr)) do
      table.insert(out.diagnostics, {
        lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, end_col = d.end_col,
        severity = d.severity, source = d.source, message = d.message,
        code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code),
      })
    end
    out.lsp_diagnostics = raw[uri] or {}
    local where = env.GROUNDING_HOVER
    if client and out.hover_provider and where and where ~= '' then
      local line, character = where:match('^(%d+):(%d+)$')
      local params = {
        textDocument = { uri = uri },
        position = { line = tonumber(line), character = tonumber(character) },
      }
      local responses = vim.lsp.buf_request_sync(bufnr, 'textDocument/hover', params, wait_ms)
      for _, response in pairs(responses or {}) do
        if response.err then out.hover_error = response.err.message or tostring(response.err) end
        if response.result then out.hover = response.result.contents end
      end
    end
  end)
  if not ok then out.error = tostring(err) end
  local file = assert(io.open(env.GROUNDING_RESULT, 'w'))
  file:write(vim.fn.json_encode(out))
  file:close()
  -- Stop the server politely (shutdown + exit) before leaving.
  local all_clients = vim.lsp.get_clients or vim.lsp.get_active_clients
  for _, client in pairs(all_clients()) do
    vim.lsp.stop_client(client.id)
  end
  vim.wait(3000, function() return #all_clients() == 0 end, 50)
  vim.cmd('qall!')
end

vim.api.nvim_create_autocmd('VimEnter', {
  callback = function() vim.schedule(run) end,
})
