"""The device mesh and multi-host coordination (leader-only work, barriers, gathers to host)."""
