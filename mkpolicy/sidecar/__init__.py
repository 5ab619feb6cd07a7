"""The sidecar proxy between the Kueue manager and its worker clusters (DESIGN.md §3)."""
