"""Running Parley: embedded services, set-up checks, the launcher and the serving process."""
