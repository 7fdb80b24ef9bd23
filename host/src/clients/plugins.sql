-- The plugins registered in this database: their roles hold what they declare.
SELECT name FROM almanac.plugins
