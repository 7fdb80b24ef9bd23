-- Where this host's claims look from (see almanac.claim_floor in migration V9).
SELECT almanac.claim_floor()
