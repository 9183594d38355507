"""`stackrace load`'s driver of the race core: one server, for a time or N requests."""
