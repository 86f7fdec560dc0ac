"""Samples keep their gate refusals and, when excluded or superseded, the reason."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models


def _reasons(apps: Any, schema_editor: Any) -> None:
    Sample = apps.get_model("learning", "Sample")
    Sample.objects.filter(status="superseded", exclusion_reason="").update(
        exclusion_reason="superseded by a newer judgement of the same answer"
    )
    Sample.objects.filter(status="excluded", exclusion_reason="").update(
        exclusion_reason="excluded by an admin"
    )


class Migration(migrations.Migration):
    dependencies = [("learning", "0003_judgement_trainingupdate_sample_and_more")]

    operations = [
        migrations.AddField(
            model_name="sample",
            name="refusals",
            field=models.PositiveSmallIntegerField(
                default=0,
                help_text="Updates that trained this sample and were refused by the gate.",
            ),
        ),
        migrations.AddField(
            model_name="sample",
            name="exclusion_reason",
            field=models.TextField(
                blank=True, help_text="Why an excluded or superseded sample is never trained."
            ),
        ),
        migrations.RunPython(_reasons, migrations.RunPython.noop),
    ]
