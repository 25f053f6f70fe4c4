"""HY-WorldPlay (HY-World 1.5) adapter."""
