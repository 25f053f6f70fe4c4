"""Evoke (Alaya-EVOKE) adapter."""
