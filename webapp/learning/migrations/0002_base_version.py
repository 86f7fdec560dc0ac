from django.db import migrations


def create_base_version(apps, schema_editor):
    PolicyVersion = apps.get_model("learning", "PolicyVersion")
    PolicyVersion.objects.get_or_create(number=0, defaults={"status": "live"})


class Migration(migrations.Migration):
    dependencies = [("learning", "0001_initial")]
    operations = [migrations.RunPython(create_base_version, migrations.RunPython.noop)]
