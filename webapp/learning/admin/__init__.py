"""Admin for the learning loop: judgements, samples, training updates and policy versions.

These rows are written only by the loop's services, so their pages are view-only (nothing is
wiped: no deletes either). What an admin may do is an action that calls a service: export as
JSONL, exclude a sample from training, re-judge, publish / roll back to a version. Every page
links along the chain sample → message → conversation → judgement → the update that consumed
the sample → the version that update produced. One module per concept; importing them
registers their admins.
"""

from webapp.learning.admin import judgements, samples, training

__all__ = ["judgements", "samples", "training"]
