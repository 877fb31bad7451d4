"""The bundled example graphs (`examples:NAME`): model builders and graph families."""
