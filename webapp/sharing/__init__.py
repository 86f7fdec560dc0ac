"""One conversation out of Parley: exported as Markdown or JSON, or shown read-only to anyone
with a link its owner can revoke."""
