-- Whether a push must run the app's background handler (APNs content-available, FCM high priority): offers.
ALTER TABLE notifications ADD COLUMN wakes_app boolean NOT NULL DEFAULT false;
