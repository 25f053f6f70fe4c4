"""Matrix-Game 3.5 adapter."""
