ALTER TABLE ordertimeout.payment_methods
    DROP CONSTRAINT payment_methods_paying_window_plain_duration;
ALTER TABLE ordertimeout.settings
    DROP CONSTRAINT settings_default_timeout_plain_duration,
    DROP CONSTRAINT settings_grace_plain_duration,
    DROP CONSTRAINT settings_paying_window_plain_duration,
    DROP CONSTRAINT settings_remind_before_plain_duration;
