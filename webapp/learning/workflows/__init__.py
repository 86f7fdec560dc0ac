"""The learning loop's workflows: each one step of the loop, its collaborators passed in.

- ``judging``: a message's evidence → the judge model → a Judgement and maybe a Sample.
- An update, in three stages:
  - ``claiming``: when an update is due, and which samples it trains, leaves fresh and holds
    back (the rules are ``trainer.claim``);
  - ``training``: the claimed samples → the trainer → a gated candidate; ``train_update`` runs
    the three stages under the training lock;
  - ``publishing``: the finished update and its candidate recorded → its lineage's home
    replica → live.
- ``recovery``: the periodic sweep that re-queues work a broker outage lost.
- ``residency``: the periodic sweep that unloads versions no longer live from the replicas.

Celery tasks (``webapp/*/tasks.py``) are a few lines around these; tests call them directly
with fakes for the judge model, the trainer and the adapter push.
"""
