"""YUME (5B) adapter: text-only camera control, one caption line per 29-frame stage."""
