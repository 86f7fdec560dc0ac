"""A person's settings: their password, the training consent new conversations start with, and
how their chat answers are sampled (temperature, answer length)."""
