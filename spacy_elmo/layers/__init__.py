"""Thinc layers around the biLM: one concept per module (the mix shared by pipe and listeners)."""
