    IF installed <> target THEN
      RAISE EXCEPTION 'alkstore: no upgrade path from % to %; nothing was changed', installed, target;
    END IF;
  END IF;

  -- Every function, from this version's sources.
  EXECUTE $alkstore_step$
