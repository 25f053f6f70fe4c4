"""Matrix-Game 3 adapter (keyboard + mouse, with matching extrinsics for the Plücker branch)."""
