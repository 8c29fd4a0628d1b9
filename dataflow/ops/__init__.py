"""In-process transforms: each module holds one family (map, batch, shuffle, repeat, combine, cache)."""
