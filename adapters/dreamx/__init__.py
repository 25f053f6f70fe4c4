"""DreamX-World (AR model) adapter."""
