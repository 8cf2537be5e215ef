#!/bin/bash
# Parse the manifest; count distinct requested permissions whose protection level is
# "dangerous" in the Android platform (the runtime-permission groups of AOSP's
# frameworks/base/core/res/AndroidManifest.xml).
cd /workspace
cat > /tmp/apk_perms.py <<'PY'
import json
import xml.etree.ElementTree as ET

ANDROID = "{http://schemas.android.com/apk/res/android}"
DANGEROUS = {
    # calendar
    "READ_CALENDAR", "WRITE_CALENDAR",
    # call log
    "READ_CALL_LOG", "WRITE_CALL_LOG", "PROCESS_OUTGOING_CALLS",
    # camera
    "CAMERA",
    # contacts
    "READ_CONTACTS", "WRITE_CONTACTS", "GET_ACCOUNTS",
    # location
    "ACCESS_FINE_LOCATION", "ACCESS_COARSE_LOCATION", "ACCESS_BACKGROUND_LOCATION",
    "ACCESS_MEDIA_LOCATION",
    # microphone
    "RECORD_AUDIO",
    # phone
    "READ_PHONE_STATE", "READ_PHONE_NUMBERS", "CALL_PHONE", "ANSWER_PHONE_CALLS",
    "ADD_VOICEMAIL", "USE_SIP", "ACCEPT_HANDOVER",
    # sensors / activity
    "BODY_SENSORS", "BODY_SENSORS_BACKGROUND", "ACTIVITY_RECOGNITION",
    # sms
    "SEND_SMS", "RECEIVE_SMS", "READ_SMS", "RECEIVE_WAP_PUSH", "RECEIVE_MMS",
    # storage / media
    "READ_EXTERNAL_STORAGE", "WRITE_EXTERNAL_STORAGE",
    "READ_MEDIA_IMAGES", "READ_MEDIA_VIDEO", "READ_MEDIA_AUDIO", "READ_MEDIA_VISUAL_USER_SELECTED",
    # nearby devices
    "BLUETOOTH_SCAN", "BLUETOOTH_CONNECT", "BLUETOOTH_ADVERTISE", "UWB_RANGING",
    "NEARBY_WIFI_DEVICES",
    # notifications
    "POST_NOTIFICATIONS",
}

root = ET.parse("/workspace/AndroidManifest.xml").getroot()
package = root.get("package")
requested = set()
for tag in ("uses-permission", "uses-permission-sdk-23", "uses-permission-sdk-m"):
    for el in root.iter(tag):
        name = el.get(ANDROID + "name") or el.get("name") or ""
        requested.add(name)
dangerous = sorted(p for p in requested
                   if p.startswith("android.permission.") and p.split(".")[-1] in DANGEROUS)
print("dangerous:", dangerous)
with open("/workspace/security_report.json", "w") as f:
    json.dump({"package_id": package, "dangerous_permissions": len(dangerous)}, f, indent=2)
print(open("/workspace/security_report.json").read())
PY
python3 /tmp/apk_perms.py
