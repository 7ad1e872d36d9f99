-- Grounding for Neovim 0.7 to 0.9 (Debian 12's `neovim` package is 0.7.2). No plugins.
-- For Neovim 0.10 and newer use grounding.lua beside this file instead.
--
-- Install: copy this file to ~/.config/nvim/plugin/grounding.lua (Neovim sources every file
-- in plugin/ at startup). Optional settings go in init.lua, which runs before plugin/:
--
--   vim.g.grounding_cmd = { 'grounding', 'lsp' }            -- the server command (default)
--   vim.g.grounding_python = '/path/to/venv/bin/python'    -- or: run `PYTHON -m grounding.cli lsp`
--   vim.g.grounding_settings = { evidence = 'shared/evidence', strict = true }  -- server settings
--   vim.g.grounding_no_mappings = true                     -- keep your own key mappings
--
-- What it does: for every Markdown file and every *.answer.json inside a folder that holds
-- grounding.toml (searched upward from the file, as git finds .git), it starts one
-- `grounding lsp` per such root and attaches it. Then in those buffers:
--
--   diagnostics     shown by Neovim (GR codes in the message source); ]d / [d jump
--   K               hover: the cited evidence line with two lines around it, its state
--   gd              go to definition: the cited evidence line (see the note on old versions)
--   gr              references: on an evidence line, the drafts citing it
--   <leader>ca      code actions: replace a quote, re-anchor a stale citation, cite, fix all
--   CTRL-X CTRL-O   completion inside a footnote definition (doc ids, versions, lines)
--   :GroundingFixAll  :GroundingCite  :GroundingConflicts  :GroundingContext  :GroundingReindex
--
-- Positions: Neovim 0.7 does not offer `general.positionEncodings` itself, so this file adds
-- it (UTF-8 first) and takes the encoding the server answers with in on_init; columns of
-- Chinese text and emoji then agree between editor and server.
--
-- Old versions: go to definition on a citation of an older version answers a read-only
-- `grounding-evidence:` document, which Neovim 0.7 cannot open (it takes the URI for a
-- relative file name). Use K to read the old line until the server answers with a file.

if vim.fn.has('nvim-0.7') == 0 then
  vim.api.nvim_err_writeln('grounding-0.7.lua needs Neovim 0.7 or newer')
  return
end

local group = vim.api.nvim_create_augroup('grounding', { clear = true })
local clients = {} -- workspace root -> client id (one server per root)

local function server_cmd()
  if vim.g.grounding_cmd then return vim.g.grounding_cmd end
  if vim.g.grounding_python then
    return { vim.g.grounding_python, '-m', 'grounding.cli', 'lsp' }
  end
  return { 'grounding', 'lsp' }
end

-- The nearest folder at or above `path`'s folder that holds grounding.toml, or nil.
local function find_root(path)
  local dir = vim.fn.fnamemodify(path, ':p:h')
  while true do
    if vim.loop.fs_stat(dir .. '/grounding.toml') then return dir end
    local parent = vim.fn.fnamemodify(dir, ':h')
    if parent == dir then return nil end
    dir = parent
  end
end

local function grounding_client(bufnr)
  for _, client in pairs(vim.lsp.buf_get_clients(bufnr)) do
    if client.name == 'grounding' then return client end
  end
  vim.notify('Grounding: no server attached to this buffer', vim.log.levels.WARN)
end

-- workspace/executeCommand with one argument object; `done(result)` on success.
local function run(bufnr, command, argument, done)
  local client = grounding_client(bufnr)
  if not client then return end
  local params = { command = command, arguments = { argument } }
  client.request('workspace/executeCommand', params, function(err, result)
    if err then
      vim.notify('Grounding: ' .. (err.message or tostring(err)), vim.log.levels.ERROR)
    elseif done then
      done(result, client)
    end
  end, bufnr)
end

local function say(result)
  if type(result) == 'table' and type(result.message) == 'string' then
    vim.notify('Grounding: ' .. result.message)
  end
end

local function text(value)
  return (value == nil or value == vim.NIL) and '-' or tostring(value)
end

-- grounding.showConflicts -> the quickfix list, one entry per conflicting source line.
local function show_conflicts(result, client)
  local items = {}
  for _, conflict in ipairs(result or {}) do
    for _, value in ipairs(conflict.values or {}) do
      table.insert(items, {
        filename = client.config.root_dir .. '/' .. value.path,
        lnum = value.line,
        text = string.format('%s / %s: %s (%s@%d)', text(conflict.subject), conflict.field,
          value.value, value.doc_id, value.version),
      })
    end
  end
  vim.fn.setqflist({}, ' ', { title = 'Grounding conflicts', items = items })
  if #items == 0 then
    vim.notify('Grounding: no same-field conflicts in the active index')
  else
    vim.cmd('copen')
  end
end

local function show_context(result)
  local reserve = result.reserve
  local budget = (reserve == nil or reserve == vim.NIL) and ' (no reserve declared)' or (' of ' .. text(reserve))
  local lines = { 'status: ' .. text(result.status), 'output tokens: ' .. text(result.outputTokens) .. budget }
  if result.message then table.insert(lines, result.message) end
  if result.error then table.insert(lines, 'error: ' .. text(result.error)) end
  for _, unit in ipairs(result.units or {}) do table.insert(lines, 'unit: ' .. unit) end
  if result.log then table.insert(lines, 'log: ' .. result.log) end
  if type(result.context) == 'table' then
    for line in vim.inspect(result.context):gmatch('[^\n]+') do table.insert(lines, line) end
  end
  vim.notify('Grounding context\n' .. table.concat(lines, '\n'))
end

-- Accepting a completion must write the item's whole textEdit: `ID sha256:HEX "LINE"` from
-- the start of the id. Neovim 0.7 inserts the newText after the typed `returns-policy@2:`
-- instead of in its place, so after CTRL-Y the text from the edit's start to the cursor is
-- replaced with the edit's newText.
local function finish_completion(client, bufnr)
  local item = vim.v.completed_item
  local lsp_item = type(item) == 'table' and vim.tbl_get(item, 'user_data', 'nvim', 'lsp',
    'completion_item')
  local edit = type(lsp_item) == 'table' and lsp_item.textEdit
  if type(edit) ~= 'table' or type(edit.newText) ~= 'string' or not edit.range then return end
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  if edit.range.start.line ~= row - 1 then return end
  local line = vim.api.nvim_get_current_line()
  local index = edit.range.start.character
  local start = client.offset_encoding == 'utf-8' and math.min(index, #line)
    or vim.str_byteindex(line, index, client.offset_encoding == 'utf-16')
  if start > col or line:sub(start + 1, col) == edit.newText then return end
  vim.api.nvim_buf_set_text(bufnr, row - 1, start, row - 1, col, { edit.newText })
  vim.api.nvim_win_set_cursor(0, { row, start + #edit.newText })
end

local function on_attach(client, bufnr)
  vim.api.nvim_buf_set_option(bufnr, 'omnifunc', 'v:lua.vim.lsp.omnifunc')
  if not vim.b[bufnr].grounding_completion then
    vim.b[bufnr].grounding_completion = true
    vim.api.nvim_create_autocmd('CompleteDone', {
      group = group, buffer = bufnr, callback = function() finish_completion(client, bufnr) end,
    })
  end
  if not vim.g.grounding_no_mappings then
    local function map(lhs, rhs, desc)
      vim.keymap.set('n', lhs, rhs, { buffer = bufnr, silent = true, desc = desc })
    end
    map('K', vim.lsp.buf.hover, 'Grounding: hover')
    map('gd', vim.lsp.buf.definition, 'Grounding: go to the cited evidence line')
    map('gr', vim.lsp.buf.references, 'Grounding: drafts citing this line')
    map('<leader>ca', vim.lsp.buf.code_action, 'Grounding: code actions')
    map(']d', vim.diagnostic.goto_next, 'next diagnostic')
    map('[d', vim.diagnostic.goto_prev, 'previous diagnostic')
  end
  local function command(name, fn, desc)
    vim.api.nvim_buf_create_user_command(bufnr, name, fn, { desc = desc })
  end
  local uri = vim.uri_from_bufnr(bufnr)
  command('GroundingFixAll', function()
    run(bufnr, 'grounding.fixAll', { uri = uri }, say)
  end, 'apply every safe citation fix in this draft')
  command('GroundingCite', function()
    local position = vim.lsp.util.make_position_params(0, client.offset_encoding).position
    run(bufnr, 'grounding.insertCitation', { uri = uri, position = position }, say)
  end, 'cite the best evidence line for the sentence under the cursor')
  command('GroundingContext', function()
    run(bufnr, 'grounding.showContext', { uri = uri }, show_context)
  end, "show this draft's declared context and token budget")
  command('GroundingConflicts', function()
    run(bufnr, 'grounding.showConflicts', {}, show_conflicts)
  end, 'list same-field conflicts in the quickfix list')
  command('GroundingReindex', function()
    run(bufnr, 'grounding.reindex', {}, function(result)
      local function count(n, word) return string.format('%d %s%s', n or 0, word, (n or 0) == 1 and '' or 's') end
      vim.notify('Grounding: ' .. count(result.documents, 'document') .. ', ' .. count(result.versions, 'version')
        .. ', ' .. count(result.conflicts, 'conflict'))
    end)
  end, 'rescan the evidence now')
end

local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  caps.general = caps.general or {}
  caps.general.positionEncodings = { 'utf-8', 'utf-16' }
  return caps
end

local function attach(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == '' or vim.bo[bufnr].buftype ~= '' then return end
  local root = find_root(name)
  if not root then return end
  local id = clients[root]
  if not id or vim.lsp.client_is_stopped(id) then
    local settings = vim.g.grounding_settings -- nil unless set
    id = vim.lsp.start_client({
      name = 'grounding',
      cmd = server_cmd(),
      root_dir = root,
      capabilities = capabilities(),
      init_options = settings,
      settings = settings and { grounding = settings } or nil,
      on_init = function(client, result)
        -- The encoding the server chose from our offer (SPEC §10); UTF-16 if it names none.
        client.offset_encoding = result.capabilities.positionEncoding or 'utf-16'
      end,
      on_attach = on_attach,
    })
    if not id then return end
    clients[root] = id
  end
  vim.lsp.buf_attach_client(bufnr, id)
end

vim.api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile' }, {
  group = group,
  pattern = { '*.md', '*.markdown', '*.answer.json' },
  callback = function(args) attach(args.buf) end,
})
