UPDATE notes SET archived = 1 WHERE created < '2023-01-01';
INSERT INTO tags (note_id, tag) SELECT id, 'old' FROM notes WHERE archived = 1;
INSERT INTO tags (note_id, tag) SELECT id, 'user-' || user_id FROM notes WHERE id % 3 = 0;
