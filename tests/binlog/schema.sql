-- The tables of tests/binlog/two_phase.py: 100 accounts of 1000 (their sum
-- never changes), a ledger row per transfer, and per client the number of
-- its transfers (equal to its ledger rows in any consistent state).
CREATE DATABASE sbtest;
CREATE TABLE sbtest.acct (id INT PRIMARY KEY, bal INT NOT NULL);
CREATE TABLE sbtest.ledger (client INT, seq INT, PRIMARY KEY (client, seq));
CREATE TABLE sbtest.counts (client INT PRIMARY KEY, n INT NOT NULL);
INSERT INTO sbtest.acct WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 100)
  SELECT n, 1000 FROM s;
INSERT INTO sbtest.counts VALUES (1, 0), (2, 0), (3, 0), (4, 0);
