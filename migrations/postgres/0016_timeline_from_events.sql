-- A document's timeline is read from its event stream (`events`, indexed by stream id and
-- version): the copy of every event kept here, its payload parsed again, is no longer written.
DROP TABLE IF EXISTS document_timeline;
