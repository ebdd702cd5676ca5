"""Sources: where records come from, each with an explicit, resumable position."""
