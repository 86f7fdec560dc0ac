from django.apps import AppConfig


class FrontDoorConfig(AppConfig):
    name = "webapp.frontdoor"
    label = "frontdoor"
    verbose_name = "Chat front door"
