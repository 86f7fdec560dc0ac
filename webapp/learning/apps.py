from django.apps import AppConfig


class LearningConfig(AppConfig):
    name = "webapp.learning"
    label = "learning"
    verbose_name = "Learning"
