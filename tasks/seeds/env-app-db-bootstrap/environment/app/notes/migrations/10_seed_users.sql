INSERT INTO users (id, email, name) VALUES (1, 'user1@example.com', 'Ada');
INSERT INTO users (id, email, name) VALUES (2, 'user2@example.com', 'Linus');
INSERT INTO users (id, email, name) VALUES (3, 'user3@example.com', 'Grace');
INSERT INTO users (id, email, name) VALUES (4, 'user4@example.com', 'Ken');
INSERT INTO users (id, email, name) VALUES (5, 'user5@example.com', 'Barbara');
INSERT INTO users (id, email, name) VALUES (6, 'user6@example.com', 'Dennis');
INSERT INTO users (id, email, name) VALUES (7, 'user7@example.com', 'Margaret');
INSERT INTO users (id, email, name) VALUES (8, 'user8@example.com', NULL);
