$alkstore_step$;
END
$alkstore_install$;
COMMIT;
