CREATE TABLE tags (
    note_id INTEGER NOT NULL REFERENCES notes(id),
    tag TEXT NOT NULL,
    UNIQUE (note_id, tag)
);
ALTER TABLE notes ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
