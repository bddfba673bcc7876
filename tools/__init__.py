"""Tools for the people who keep tinyacp: scripts run by hand, never by the package."""
