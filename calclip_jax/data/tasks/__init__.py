"""Task definitions; each module registers its task with `register_task`."""
