from django.apps import AppConfig


class AccountConfig(AppConfig):
    name = "webapp.account"
    label = "account"
    verbose_name = "Account settings"
