CREATE INDEX idx_notes_user ON notes(user_id, created);
CREATE INDEX idx_tags_tag ON tags(tag);
