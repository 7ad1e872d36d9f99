"""Text the server shows to people (hover Markdown), rendered from core values."""
