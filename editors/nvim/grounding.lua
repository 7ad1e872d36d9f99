-- Grounding for Neovim 0.10 and newer (0.11: vim.lsp.config + vim.lsp.enable; 0.10:
-- vim.lsp.start from a FileType autocmd). No plugins, no nvim-lspconfig.
-- For Neovim 0.7 to 0.9 use grounding-0.7.lua beside this file instead.
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
-- grounding.toml (searched upward from the file, as git finds .git), one `grounding lsp` per
-- such root is started and attached. Then in those buffers:
--
--   diagnostics     shown as virtual text for this server (GR codes); ]d / [d jump
--   K               hover: the cited evidence line with two lines around it, its state
--   gd              go to definition: the cited evidence line; an old version opens as a
--                   read-only buffer `grounding-evidence:/DOC_ID@VERSION` filled by the server
--   grr             references: on an evidence line, the drafts citing it
--   gra, <leader>ca code actions: replace a quote, re-anchor a stale citation, cite, fix all
--   CTRL-X CTRL-O   completion inside a footnote definition (doc ids, versions, lines)
--   :GroundingFixAll  :GroundingCite  :GroundingConflicts  :GroundingContext  :GroundingReindex
--
-- Positions: the client offers UTF-8 first and Neovim uses whatever encoding the server picks,
-- so columns of Chinese text and emoji agree between editor and server (SPEC §10).

if vim.fn.has('nvim-0.10') == 0 then
  vim.api.nvim_err_writeln('grounding.lua needs Neovim 0.10 or newer; use grounding-0.7.lua')
  return
end

local has_011 = vim.fn.has('nvim-0.11') == 1
local group = vim.api.nvim_create_augroup('grounding', { clear = true })
local VERSION_SCHEME = 'grounding-evidence:'

-- Client methods are called as client:request(...) from 0.11 on, client.request(...) before.
local function call(client, method, ...)
  if has_011 then return client[method](client, ...) end
  return client[method](...)
end

local function server_cmd()
  if vim.g.grounding_cmd then return vim.g.grounding_cmd end
  if vim.g.grounding_python then
    return { vim.g.grounding_python, '-m', 'grounding.cli', 'lsp' }
  end
  return { 'grounding', 'lsp' }
end

-- The workspace root of a buffer (the folder holding grounding.toml, searched upward), or nil
-- for buffers the server does not serve: other JSON files, old versions, unnamed buffers.
local function root_of(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == '' or vim.bo[bufnr].buftype ~= '' or vim.startswith(name, VERSION_SCHEME) then
    return nil
  end
  if vim.bo[bufnr].filetype == 'json' and not name:match('%.answer%.json$') then return nil end
  return vim.fs.root(bufnr, 'grounding.toml')
end

local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  caps.general = caps.general or {}
  caps.general.positionEncodings = { 'utf-8', 'utf-16', 'utf-32' }
  return caps
end

local function settings()
  -- versionDocuments = 'virtual': this client opens grounding-evidence: URIs itself (below).
  return vim.tbl_extend('force', { versionDocuments = 'virtual' }, vim.g.grounding_settings or {})
end

local function config()
  return {
    name = 'grounding',
    cmd = server_cmd(),
    filetypes = { 'markdown', 'json' },
    capabilities = capabilities(),
    init_options = settings(),
    settings = { grounding = settings() },
  }
end

-- Commands ---------------------------------------------------------------------------------

local function grounding_client(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr, name = 'grounding' })[1]
    or vim.notify('Grounding: no server attached to this buffer', vim.log.levels.WARN)
end

-- workspace/executeCommand with one argument object; `done(result, client)` on success.
local function run(bufnr, command, argument, done)
  local client = grounding_client(bufnr)
  if not client then return end
  local params = { command = command, arguments = { argument } }
  call(client, 'request', 'workspace/executeCommand', params, function(err, result)
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
        filename = vim.fs.joinpath(client.root_dir, value.path),
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
    vim.list_extend(lines, vim.split(vim.inspect(result.context), '\n'))
  end
  vim.notify('Grounding context\n' .. table.concat(lines, '\n'))
end

-- Accepting a completion must write the item's whole textEdit: `ID sha256:HEX "LINE"` from
-- the start of the id. Neovim 0.10+ inserts it only up to its first space (the hash and quote
-- would be lost), so after CTRL-Y the text from the edit's start to the cursor is replaced
-- with the edit's newText.
local function byte_index(line, index, encoding)
  if encoding == 'utf-8' then return math.min(index, #line) end
  if has_011 then return vim.str_byteindex(line, encoding, index, false) end
  return vim.str_byteindex(line, index, encoding == 'utf-16')
end

local function finish_completion(client, bufnr)
  local reason = vim.v.event and vim.v.event.reason
  if reason and reason ~= 'accept' then return end
  local item = vim.v.completed_item
  local lsp_item = type(item) == 'table' and vim.tbl_get(item, 'user_data', 'nvim', 'lsp',
    'completion_item')
  local edit = type(lsp_item) == 'table' and lsp_item.textEdit
  if type(edit) ~= 'table' or type(edit.newText) ~= 'string' or not edit.range then return end
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  if edit.range.start.line ~= row - 1 then return end
  local line = vim.api.nvim_get_current_line()
  local start = byte_index(line, edit.range.start.character, client.offset_encoding)
  if start > col or line:sub(start + 1, col) == edit.newText then return end
  vim.api.nvim_buf_set_text(bufnr, row - 1, start, row - 1, col, { edit.newText })
  vim.api.nvim_win_set_cursor(0, { row, start + #edit.newText })
end

local function on_attach(client, bufnr)
  vim.bo[bufnr].omnifunc = 'v:lua.vim.lsp.omnifunc'
  if not vim.b[bufnr].grounding_completion then
    vim.b[bufnr].grounding_completion = true
    vim.api.nvim_create_autocmd('CompleteDone', {
      group = group, buffer = bufnr, callback = function() finish_completion(client, bufnr) end,
    })
  end
  -- Neovim 0.11 shows no virtual text by default; show it for this server's findings only.
  vim.diagnostic.config({ virtual_text = true }, vim.lsp.diagnostic.get_namespace(client.id))
  if not vim.g.grounding_no_mappings then
    local function map(lhs, rhs, desc)
      vim.keymap.set('n', lhs, rhs, { buffer = bufnr, silent = true, desc = desc })
    end
    map('K', vim.lsp.buf.hover, 'Grounding: hover')
    map('gd', vim.lsp.buf.definition, 'Grounding: go to the cited evidence line')
    map('grr', vim.lsp.buf.references, 'Grounding: drafts citing this line')
    map('gra', vim.lsp.buf.code_action, 'Grounding: code actions')
    map('<leader>ca', vim.lsp.buf.code_action, 'Grounding: code actions')
  end
  if vim.startswith(vim.api.nvim_buf_get_name(bufnr), VERSION_SCHEME) then return end
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

vim.api.nvim_create_autocmd('LspAttach', {
  group = group,
  callback = function(args)
    local client = vim.lsp.get_client_by_id(args.data.client_id)
    if client and client.name == 'grounding' then on_attach(client, args.buf) end
  end,
})

-- Old versions: a read-only buffer filled from the server's grounding/versionText -----------

-- Fill buffer `bufnr` named grounding-evidence:/DOC_ID@VERSION with that version's indexed
-- text, asking the server of the draft we came from first, then any other Grounding server.
local function read_version(bufnr, uri)
  local candidates = vim.lsp.get_clients({ bufnr = vim.fn.bufnr('#'), name = 'grounding' })
  vim.list_extend(candidates, vim.lsp.get_clients({ name = 'grounding' }))
  for _, client in ipairs(candidates) do
    local response = call(client, 'request_sync', 'grounding/versionText', { uri = uri }, 10000)
    local result = response and response.result
    if type(result) == 'table' and type(result.text) == 'string' then
      -- The server's lines: \r\n, \r and \n end a line; a final one starts no extra line.
      local body = result.text:gsub('\r\n', '\n'):gsub('\r', '\n')
      local lines = vim.split(body, '\n', { plain = true })
      if body:sub(-1) == '\n' then table.remove(lines) end
      vim.bo[bufnr].modifiable = true
      vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, lines)
      vim.bo[bufnr].buftype = 'nofile'
      vim.bo[bufnr].swapfile = false
      vim.bo[bufnr].modified = false
      vim.bo[bufnr].modifiable = false
      vim.bo[bufnr].readonly = true
      vim.bo[bufnr].filetype = result.languageId or 'markdown'
      vim.b[bufnr].grounding_version = { docId = result.docId, version = result.version,
        path = result.path }
      vim.lsp.buf_attach_client(bufnr, client.id) -- references from an old line
      return
    end
  end
  vim.notify('Grounding: no server knows ' .. uri, vim.log.levels.WARN)
end

vim.api.nvim_create_autocmd('BufReadCmd', {
  group = group,
  pattern = VERSION_SCHEME .. '/*', -- a pattern with '/' matches the whole buffer name
  callback = function(args) read_version(args.buf, vim.api.nvim_buf_get_name(args.buf)) end,
})

-- Starting the server -----------------------------------------------------------------------

if has_011 and vim.lsp.config and vim.lsp.enable then
  local cfg = config()
  cfg.root_dir = function(bufnr, on_dir)
    local root = root_of(bufnr)
    if root then on_dir(root) end -- no grounding.toml: the server is not started
  end
  vim.lsp.config('grounding', cfg)
  vim.lsp.enable('grounding')
else
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = { 'markdown', 'json' },
    callback = function(args)
      local root = root_of(args.buf)
      if not root then return end
      local cfg = config()
      cfg.root_dir = root
      vim.lsp.start(cfg, { bufnr = args.buf }) -- reuses the client of the same root
    end,
  })
end
