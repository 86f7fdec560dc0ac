"""The "My model" page: a user's own policy lineage, what taught it, and their say over it."""
