from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "webapp.memory"
    label = "memory"
    verbose_name = "Memory"
