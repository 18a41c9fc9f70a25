// The plugin's INFORMATION_SCHEMA tables (information_schema.cc): the init
// functions of their plugin declarations in subito_plugin.cc.
#pragma once

namespace subito::mariadb {

int InitTableIoSchema(void* p);    // SUBITO_TABLE_IO (FLUSH SUBITO_TABLE_IO resets it)
int InitFilesSchema(void* p);      // SUBITO_FILES
int InitPlacementSchema(void* p);  // SUBITO_PLACEMENT_ADVICE

}  // namespace subito::mariadb
