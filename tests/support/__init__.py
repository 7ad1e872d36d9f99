"""The one test harness of the language server.

See each module:

- :mod:`tests.support.workspace` — the workspace builder (byte-exact files in a temporary folder);
- :mod:`tests.support.recorder` — the recorder of everything a server sends, with waits;
- :mod:`tests.support.lsp` — the client factory: the real server over stdio (pytest-lsp) under
  the VS Code, Neovim, pull-diagnostics and minimal profiles;
- :mod:`tests.support.inprocess` — a session in this process for calling feature functions
  directly, whose client port records into the same recorder.

Import it as ``tests.support`` (``tests/core/support.py`` is the core suite's own helper).
"""
