"""``python -m server``: run the language server on stdio (same as ``grounding lsp``)."""

from server.app import serve_stdio

if __name__ == "__main__":
    raise SystemExit(serve_stdio())
