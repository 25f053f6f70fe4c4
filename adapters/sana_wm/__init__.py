"""SANA-WM adapter."""
