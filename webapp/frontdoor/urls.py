from __future__ import annotations

from django.urls import path

from webapp.frontdoor import views

app_name = "chat"
urlpatterns = [
    path("", views.index, name="index"),
    path("new/", views.conversation_new, name="new"),
    path("list/", views.conversation_list, name="list"),
    path("<int:pk>/", views.conversation_detail, name="conversation"),
    path("<int:pk>/rename/", views.conversation_rename, name="rename"),
    path("<int:pk>/delete/", views.conversation_delete, name="delete"),
    path("<int:pk>/consent/", views.conversation_consent, name="consent"),
    path("messages/<int:pk>/feedback/", views.message_feedback, name="feedback"),
    path("messages/<int:pk>/compare/", views.message_compare, name="compare"),
    path(
        "messages/<int:pk>/learning-status/",
        views.message_learning_status,
        name="learning_status",
    ),
    path("messages/<int:pk>/select/", views.message_select, name="select"),
]
