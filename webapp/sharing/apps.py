from django.apps import AppConfig


class SharingConfig(AppConfig):
    name = "webapp.sharing"
    label = "sharing"
    verbose_name = "Sharing"
