"""The learning loop's workflows: each one step of the loop, its collaborators passed in.

- ``judging``: a message's evidence → the judge model → a Judgement and maybe a Sample.
- ``training``: ready samples → a TrainingUpdate → a gated candidate PolicyVersion.
- ``publishing``: a PolicyVersion → every serving replica → live.
- ``recovery``: the periodic sweep that re-queues work a broker outage lost.

Celery tasks (``webapp/*/tasks.py``) are a few lines around these; tests call them directly
with fakes for the judge model, the trainer and the adapter push.
"""
