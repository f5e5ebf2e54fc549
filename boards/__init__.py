"""Board top levels and platform glue (amaranth-boards platforms)."""
